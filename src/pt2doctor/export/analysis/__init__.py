"""The export side of analysis: pure functions, no runs (see `pt2doctor.export`)."""
