"""The stack's configuration as plain Python: its schema, the loader that validates it, and the domain
tables it is checked against (Azure naming rules, GPU sizes, demo expiry). No Pulumi here, so the config
can be read and checked by tools that never run the program."""
