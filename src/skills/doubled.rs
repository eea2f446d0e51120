//! Files two skill roots read. The default layout puts `local_skills_folder` inside
//! `skills_folder` (`skills/iii`), so each file of the local folder is a row of both roots:
//! `ns` from the local root and `iii/ns` from the other, and `list` shows both, as the contract
//! does. The answers that offer a model or a person files to read rather than ids to look up
//! (the catalog, skill search, `check --spec`) take each such file once: as its local row, the
//! one precedence serves, when that row is in the answer, and as its second reading otherwise
//! (a `prefix` that narrows into that folder, `iii/`; a caller who cannot see the local row,
//! its namespace not an installed worker's, to whom `list` shows the second reading alone).

use super::listed::Listed;
use crate::roots::{Root, Roots};

/// Which rows are second readings of a local file, for one configuration of the roots.
#[derive(Clone, Debug, Default)]
pub struct Doubled {
    /// The local folder's place inside `skills_folder`, as an id prefix (`iii/`); `None` when
    /// it is elsewhere.
    within_skills: Option<Box<str>>,
}

impl Doubled {
    pub fn of(roots: &Roots) -> Doubled {
        let within_skills = roots
            .get(Root::LocalSkills)
            .zip(roots.get(Root::Skills))
            .and_then(|(local, skills)| local.strip_prefix(skills).ok())
            .filter(|inner| !inner.as_os_str().is_empty())
            .and_then(|inner| inner.to_str())
            .map(|inner| format!("{inner}/").into_boxed_str());
        Doubled { within_skills }
    }

    /// Whether the file `rel` (or the on-disk id, which starts the same way) of `root` is the
    /// second reading of a local file.
    pub fn holds(&self, root: Option<Root>, rel: &str) -> bool {
        root == Some(Root::Skills)
            && self
                .within_skills
                .as_deref()
                .is_some_and(|prefix| rel.starts_with(prefix))
    }

    /// Whether `row` is the second reading of a local file.
    pub fn holds_row(&self, row: &Listed) -> bool {
        self.holds(row.root, row.id())
    }

    /// Whether `row` is the second reading of a local file whose local row is in the same
    /// answer (`local_in`, asked with the local id): an answer taking each file once then
    /// leaves `row` out.
    pub fn answered_as_local(&self, row: &Listed, local_in: impl FnOnce(&str) -> bool) -> bool {
        self.holds_row(row) && self.local_id(row.id()).is_some_and(local_in)
    }

    /// The local reading's id of the second reading `id` (`iii/pdf` → `pdf`), when `id` is one
    /// (an id of `skills_folder`'s rows under the local folder's place).
    pub fn local_id<'a>(&self, id: &'a str) -> Option<&'a str> {
        id.strip_prefix(self.within_skills.as_deref()?)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn roots(skills: &str, local: &str) -> Roots {
        Roots::new(
            PathBuf::from(skills),
            PathBuf::from(local),
            PathBuf::from("/p/.agents/skills"),
            PathBuf::from("/p/agents"),
        )
    }

    #[test]
    fn a_local_folder_inside_skills_folder_makes_its_files_second_readings_there() {
        let doubled = Doubled::of(&roots("/p/skills", "/p/skills/iii"));
        assert!(doubled.holds(Some(Root::Skills), "iii/pdf/SKILL.md"));
        assert!(doubled.holds(Some(Root::Skills), "iii/pdf/index"));
        // The local reading, a file beside the folder, and other roots are not.
        assert!(!doubled.holds(Some(Root::LocalSkills), "iii/pdf/SKILL.md"));
        assert!(!doubled.holds(Some(Root::Skills), "iii.md"));
        assert!(!doubled.holds(Some(Root::Skills), "iii-tools/x.md"));
        assert!(!doubled.holds(None, "iii/pdf/index"));
        assert_eq!(doubled.local_id("iii/pdf/index"), Some("pdf/index"));
        assert_eq!(doubled.local_id("iii-tools/x"), None);
    }

    #[test]
    fn a_local_folder_elsewhere_doubles_nothing() {
        for (skills, local) in [("/p/skills", "/p/local"), ("/p/skills/iii", "/p/skills")] {
            let doubled = Doubled::of(&roots(skills, local));
            assert!(!doubled.holds(Some(Root::Skills), "iii/pdf/SKILL.md"));
            assert_eq!(doubled.local_id("iii/pdf"), None);
        }
        let deeper = Doubled::of(&roots("/p/skills", "/p/skills/team/mine"));
        assert!(deeper.holds(Some(Root::Skills), "team/mine/x.md"));
        assert!(!deeper.holds(Some(Root::Skills), "team/other/x.md"));
    }
}
