"""Bundled data of guiderag (package data, read through guiderag.resources): the demo
sample guideline site (written for guiderag; not medical advice) and the synonym table."""
