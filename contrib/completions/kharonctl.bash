# bash-completion loads this file the first time kharonctl is completed (Homebrew's, from
# $(brew --prefix)/etc/bash_completion.d, at shell start). kharonctl prints its own (dynamic)
# completion script, so completion always matches the installed version. `eval`, not
# `source <(…)`: macOS's bash 3.2 sources nothing from a process substitution.
eval "$(kharonctl completions bash)"
