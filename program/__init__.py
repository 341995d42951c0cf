"""The program core: the stack's config read once and checked whole (``config/``), the layers the pipeline builds
from the components (``layers/``), the pipeline, and the ``Scenario`` record with the ``Platform`` a stack stands
on (``scenario.py``). With ``__main__.py``, the only place that joins the components and the stacks; it never
imports a stack."""
