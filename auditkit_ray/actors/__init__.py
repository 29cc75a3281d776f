"""What runs inside the pipeline's Ray actors: the retrieval, generation and
scoring stages (``retrieve``, ``generate``, ``score``), the shard that travels
between them (``shard``), the tables they store (``tables``) and the tally of
each scored shard (``tally``). Nothing here imports the driver side
(``pipeline/``); the driver imports these."""
