"""Conversation sets of our own on the demo guidebooks (README.md): transfer sets for reading follow-ups."""
