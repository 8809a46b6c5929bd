import sys
import warnings

warnings.warn("a warning of the program's own, on stderr")
print("first line")
print("to stderr", file=sys.stderr)
print("second line")
