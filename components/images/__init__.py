"""Container images in the stack's registry: built from a folder under docker/, or copied from a public registry."""
