"""The store: the SQLite results store, the embedded default, with its migrations (`db`); the
leaderboard queries over it (`leaderboard`) and the A/B comparison of two runs (`compare`).
Above the evaluation (the leaderboard scores with `core.evaluation.scoring`), beside the agents."""
