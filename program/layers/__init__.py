"""What the pipeline builds for every stack from its config and its scenario's needs: the Azure layer, the GPU
software, the scenario's workspace, its images."""
