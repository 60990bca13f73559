print("plings-bench: coming")
