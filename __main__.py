"""Entry point for `pulumi up`, and the one place that joins the platform and the scenarios: read and check the
stack's config once, then run its scenario on the platform."""

from program.pipeline import run
from stacks import REGISTRY

run(REGISTRY)
