"""pt2doctor.examples"""
