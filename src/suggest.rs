//! "Did you mean": the nearest known names to a misspelt one, for every error about an
//! unknown name (plan keys, ops, attributes, dims, sampler kinds, CLI values).

/// ", did you mean `x`?" for the known names nearest to `name` (the fewest edits, counting a
/// swap of neighbours as one, up to 2; or names it is a prefix of), or "" when none is near.
pub fn did_you_mean<'a>(name: &str, known: impl Iterator<Item = &'a str>) -> String {
    let limit = if name.chars().count() <= 3 { 1 } else { 2 };
    let near: Vec<(usize, &str)> = known
        .filter_map(|k| {
            let d = strsim::damerau_levenshtein(name, k);
            let prefix = name.len() >= 3 && k.starts_with(name);
            (d <= limit || prefix).then_some((if prefix { 1.min(d) } else { d }, k))
        })
        .collect();
    let Some(best) = near.iter().map(|(d, _)| *d).min() else {
        return String::new();
    };
    let mut near: Vec<&str> = near
        .iter()
        .filter(|(d, _)| *d == best)
        .map(|(_, k)| *k)
        .collect();
    near.sort();
    match near.as_slice() {
        [k] => format!(", did you mean `{k}`?"),
        many => {
            let list: Vec<String> = many.iter().take(3).map(|k| format!("`{k}`")).collect();
            format!(", did you mean one of {}?", list.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::did_you_mean;

    #[test]
    fn one_near_name_is_suggested() {
        let known = ["relu", "sigmoid", "tanh"];
        assert_eq!(
            did_you_mean("rleu", known.into_iter()),
            ", did you mean `relu`?"
        );
        assert_eq!(
            did_you_mean("sigmod", known.into_iter()),
            ", did you mean `sigmoid`?"
        );
    }

    #[test]
    fn ties_are_listed_sorted_and_far_names_give_nothing() {
        let known = ["mean", "meat", "sum"];
        assert_eq!(
            did_you_mean("mea", known.into_iter()),
            ", did you mean one of `mean`, `meat`?"
        );
        assert_eq!(did_you_mean("xyzzy", known.into_iter()), "");
        // Short names allow one edit only.
        assert_eq!(did_you_mean("abc", ["xyz"].into_iter()), "");
    }
}
