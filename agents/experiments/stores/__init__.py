"""Results on disk: the results store (a grid's cells, a study's tables) and the provenance
it records (data, package versions, source)."""
