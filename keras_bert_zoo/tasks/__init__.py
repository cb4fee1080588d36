"""Task families: what each feeds the model, what it reads out, and how it is scored."""
