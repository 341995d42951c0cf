"""The stack's configuration as plain Python: its sections (``schema.py``), the rules across keys, the loader, the
generated reference, and the domain tables it is checked against (Azure naming rules, GPU sizes, demo expiry).
No Pulumi here, so tools read and check a stack's config without running the program."""
