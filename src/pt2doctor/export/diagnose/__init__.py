"""diagnose's export branch (see `pt2doctor.export`)."""
