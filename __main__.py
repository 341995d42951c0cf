"""Entry point for `pulumi up`, and the one place that joins the platform and the scenarios: read and check the
stack's config once, then run its scenario on the platform."""

from aksgpu.pipeline import run
from scenarios import REGISTRY

run(REGISTRY)
