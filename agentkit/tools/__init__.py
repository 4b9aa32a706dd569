"""Tools: definitions from typed functions, and the dispatcher that runs them."""
