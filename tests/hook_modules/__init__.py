"""Tool hooks the tests name in `[hooks]` by import path (`tests.hook_modules.policy:...`)."""
