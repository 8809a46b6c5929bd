"""pt2doctor.report"""
