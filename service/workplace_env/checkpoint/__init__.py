"""Checkpoint and restore: the table codec, session snapshots, and their files."""
