print("batonctl: not yet")
