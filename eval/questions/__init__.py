"""Bundled question workbooks (protocol.xlsx, sample_patient.xlsx) and their generators."""
