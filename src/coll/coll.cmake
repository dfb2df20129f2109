# Collective algorithms: owned by the collectives work (see src/coll/).
