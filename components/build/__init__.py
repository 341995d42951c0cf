"""Container images built from a folder under docker/ into the stack's registry."""
