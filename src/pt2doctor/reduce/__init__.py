"""pt2doctor.reduce"""
