"""The platform every scenario stands on: the config core (``config/``), components by concern (``azure/``,
``kubernetes/``, ``gpu/``, ``images/``, ``volumes/``, ``identity/``, ``monitoring/``, ``autoscaling/``), the layers
the pipeline builds from them (``layers/``), and the pipeline. It never imports a scenario (``scenarios/``)."""
