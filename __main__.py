"""Entry point for `pulumi up`: read and check the stack's config once, then run its scenario's pipeline."""

from program.pipeline import main

main()
