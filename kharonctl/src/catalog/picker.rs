//! Choosing one cluster: the fuzzy picker, and when to open it. `switch` with no id opens it over
//! every cluster it can switch to; a partial id or glob that several clusters match (`switch ID`,
//! `clusters ID <action>`, `test ID…`) opens it with the partial id already typed. Nobody at a
//! terminal (output piped, as in a script): no picker, but the listing (`switch`) or an error that
//! lists the matches ([`catalog::Error::Ambiguous`], exit code 2), as kubectx does with fzf.
//!
//! Each line shows the id, display name, tenant and how the cluster is reached
//! ([`catalog::lines`]); `*` marks the current kube context, `-` the previous one (`switch -`),
//! which comes first. Typing filters with skim's fuzzy matcher over the whole line, Enter picks,
//! Esc cancels.

use std::io::IsTerminal as _;

use inquire::Select;
use inquire::list_option::ListOption;
use kharon_routing::inventory::Cluster;

use crate::catalog;
use crate::kube::{self, Kubeconfig};

/// At most this many lines are shown at once; the rest scroll.
const PAGE_SIZE: usize = 12;

/// The kube contexts the picker marks.
#[derive(Debug, Clone, Default)]
pub struct Marks {
    pub current: Option<String>,
    pub previous: Option<String>,
}

impl Marks {
    pub fn of(kubeconfig: &Kubeconfig) -> Self {
        Self {
            current: kubeconfig.current_context().map(str::to_owned),
            previous: kubeconfig.last_context().map(str::to_owned),
        }
    }

    /// The marks of the kubeconfig kubectl uses; none when it cannot be read (the picker works
    /// without them, and the command reports a broken kubeconfig where it needs one).
    pub fn of_default_kubeconfig() -> Self {
        kube::destination::default_path()
            .and_then(|path| Kubeconfig::load(&path))
            .map(|k| Self::of(&k))
            .unwrap_or_default()
    }
}

/// Whether a person can pick: standard input, output and error are all terminals. Piped output
/// means a script, which must not block on a question.
pub fn interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal() && std::io::stderr().is_terminal()
}

/// The one cluster `name` means among those of `tenant` that are `eligible` ([`catalog::candidates`]):
/// the only match, else the person's pick, else [`catalog::Error::Ambiguous`] listing the matches.
pub fn one<'a>(
    clusters: &'a [Cluster],
    name: &str,
    tenant: Option<&str>,
    eligible: impl Fn(&Cluster) -> bool,
    marks: &Marks,
    prompt: &str,
) -> anyhow::Result<&'a Cluster> {
    let found = catalog::candidates(clusters, name, tenant, &eligible)?;
    if let [one] = found.as_slice() {
        return Ok(one);
    }
    if !interactive() {
        return Err(catalog::Error::Ambiguous { name: name.to_owned(), lines: catalog::lines(&found) }.into());
    }
    if catalog::is_glob(name) {
        // `*` and `?` mean nothing to the fuzzy matcher: choose among the glob's matches.
        return pick(found, "", marks, prompt);
    }
    // The partial id is typed in already: deleting letters widens the choice to every cluster.
    let all = clusters.iter().filter(|c| tenant.is_none_or(|t| c.tenant == t) && eligible(c)).collect();
    pick(all, name, marks, prompt)
}

/// One line of the picker.
struct Choice<'a> {
    cluster: &'a Cluster,
    line: String,
}

impl std::fmt::Display for Choice<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.line)
    }
}

/// The picker's lines: the previous context first, then the others in the order given.
fn choices<'a>(mut clusters: Vec<&'a Cluster>, marks: &Marks) -> Vec<Choice<'a>> {
    if let Some(at) = clusters.iter().position(|c| marks.previous.as_deref() == Some(c.id.as_str())) {
        let previous = clusters.remove(at);
        clusters.insert(0, previous);
    }
    let lines = catalog::lines(&clusters);
    clusters
        .into_iter()
        .zip(lines)
        .map(|(cluster, line)| {
            let mark = if marks.current.as_deref() == Some(cluster.id.as_str()) {
                '*'
            } else if marks.previous.as_deref() == Some(cluster.id.as_str()) {
                '-'
            } else {
                ' '
            };
            Choice { cluster, line: format!("{mark} {line}") }
        })
        .collect()
}

/// Asks the person at the terminal to choose one of `clusters`, with `query` already typed.
pub fn pick<'a>(
    clusters: Vec<&'a Cluster>,
    query: &str,
    marks: &Marks,
    prompt: &str,
) -> anyhow::Result<&'a Cluster> {
    if clusters.is_empty() {
        anyhow::bail!("there is no cluster to choose from; `kharonctl update` fetches them");
    }
    // Stable, so equal scores (all of them, before anything is typed) keep our order.
    let by_score = &|scored: &mut [(usize, i64)]| scored.sort_by_key(|&(_, score)| std::cmp::Reverse(score));
    let answer = Select::new(prompt, choices(clusters, marks))
        .with_starting_filter_input(query)
        .with_sorter(by_score)
        .with_formatter(&|chosen: ListOption<&Choice>| chosen.value.cluster.id.clone())
        .with_page_size(PAGE_SIZE)
        .with_help_message("type to filter, ↑↓ to move, enter to pick, esc to cancel (* current, - previous)")
        .prompt_skippable();
    match answer {
        Ok(Some(choice)) => Ok(choice.cluster),
        Ok(None) | Err(inquire::InquireError::OperationInterrupted) => anyhow::bail!("no cluster picked"),
        Err(e) => Err(anyhow::anyhow!("cannot show the cluster picker: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(id: &str, jumphost: Option<&str>) -> Cluster {
        let mut c = serde_json::json!({"id": id, "tenant": "t-a", "displayName": id.to_uppercase()});
        if let Some(j) = jumphost {
            c["facts"] = serde_json::json!({"jumphost": j});
        }
        serde_json::from_value(c).unwrap()
    }

    #[test]
    fn the_previous_context_comes_first_and_both_are_marked() {
        let all = [cluster("c-a", None), cluster("c-b", Some("jump-b")), cluster("c-c", None)];
        let marks = Marks { current: Some("c-a".into()), previous: Some("c-c".into()) };
        let lines: Vec<String> =
            choices(all.iter().collect(), &marks).iter().map(|c| c.line.clone()).collect();
        assert_eq!(
            lines,
            ["- c-c  C-C  t-a  direct", "* c-a  C-A  t-a  direct", "  c-b  C-B  t-a  via jump-b"],
            "{lines:#?}"
        );
    }
}
