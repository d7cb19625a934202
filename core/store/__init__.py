"""The store: the SQLite results store, the embedded default (`db`: `Store`, built from its
connection `base`, its `jobs` and results, its `attempts`; the rows it returns `rows`), its schema
migrations (`migrations`) and its errors (`errors`); the leaderboard queries over it
(`leaderboard`, what a board is made of `standings`) and the A/B comparison of two runs
(`compare`). Above the evaluation (the leaderboard scores with `core.evaluation.scoring`), beside
the agents."""
