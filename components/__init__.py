"""The Pulumi component classes, by concern (``azure/``, ``kubernetes/``, ``gpu/``, ``images/``, ``volumes/``,
``identity/``, ``monitoring/``, ``autoscaling/``, ``training/``), and the vocabulary they take as arguments
(``vocabulary.py``, the GPU sizes in ``gpu/sizes.py``). A component takes its own ``...Args``, never a config
section, and imports nothing of the program core or a stack.

Type tokens are frozen. A component's token (``aksgpu:aks:Cluster``) and its logical name are part of the URN of
the component and of every resource under it; their middle parts (``aks``, ``k8s``, ``build``, ``storage``,
``workloads``) come from the first layout and no longer match these folders. Changing one makes Pulumi delete every
resource under it and create it anew on deployed stacks, unless the component declares its old identity as a
``pulumi.Alias`` (as ``azure/cluster.py`` does for the AcrPull grant that moved from the registry). The URN pins
(``tests/urns/``, ``offline/urns.py``) fail on any such change."""
