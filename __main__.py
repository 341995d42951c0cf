"""Entry point for `pulumi up`: one typed config read, then the scenario's build."""

from stacks.program import build, read_stack_config

build(read_stack_config())
