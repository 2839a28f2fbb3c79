"""Results on disk: the results store, episodes of published codes, provenance, and damaged
copies of files for the robustness sweep."""
