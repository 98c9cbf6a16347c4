# fish loads this file the first time kharonctl is completed. kharonctl prints its own (dynamic)
# completion script, so completion always matches the installed version.
kharonctl completions fish | source
