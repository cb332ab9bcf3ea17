"""``workplace-env run``: playing a JSONL file's episodes through a server and reporting them."""
