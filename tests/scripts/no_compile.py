import sys
print("args:", sys.argv[1:])
print("stdin:", sys.stdin.read().strip())
