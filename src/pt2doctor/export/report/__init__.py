"""The export side of report: renderers only (see `pt2doctor.export`)."""
