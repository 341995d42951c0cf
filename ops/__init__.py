"""What asks Azure (capacity, catalogue, leftovers), a cluster or PyPI, and what the workflows decide from the stack
files (which stacks, which runner, what a push deploys, what a preview may replace): ``python -m ops``."""
