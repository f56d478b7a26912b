"""Goals ("contexts") of HIRO: the context object, its samplers, transitions and rewards."""
