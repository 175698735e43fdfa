"""Extensions the tests name by import path, as a profile's `[hooks]` names them."""
