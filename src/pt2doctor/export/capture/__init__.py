"""The export side of capture: runs inside the script's process (see `pt2doctor.export`)."""
