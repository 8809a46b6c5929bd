"""pt2doctor.bisect"""
