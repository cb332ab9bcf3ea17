"""The domain's data: the six workplace tables and the 27 tools over them."""
