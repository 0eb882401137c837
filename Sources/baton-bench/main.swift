print("baton-bench: not yet")
