//! New code for a position: a script compiled here, or a chain object
//! (`nfkit compile -o`, [`nfkit_lang::chain_object`]) that the switch
//! loads without compiling (docs/update.md, "Code as objects").

use crate::SwitchError;
use nfkit_abi::Hook;
use nfkit_control::runner::ScriptVm;
use nfkit_lang::chain_object::ChainObject;
use nfkit_lang::Compiled;
use nfkit_vm::VmConfig;

/// Code to load.
#[derive(Clone, Copy)]
pub enum Code<'a> {
    /// A compiled script.
    Script(&'a Compiled),
    /// A chain object read back.
    Object(&'a ChainObject),
}

/// A pipeline's post program: compiled from the script (owned), or the
/// object's own.
pub(crate) enum PostCode<'a> {
    Script(Box<Compiled>),
    Object(&'a ChainObject),
}

impl PostCode<'_> {
    pub(crate) fn code(&self) -> Code<'_> {
        match self {
            PostCode::Script(c) => Code::Script(c),
            PostCode::Object(o) => Code::Object(o),
        }
    }
}

impl<'a> Code<'a> {
    /// The hook it was compiled for.
    pub fn hook(&self) -> Hook {
        match self {
            Code::Script(c) => c.hook,
            Code::Object(o) => o.hook,
        }
    }

    /// Loaded into a VM configured by `config`, keeping `old`'s maps by
    /// name (or with new maps).
    pub(crate) fn load(
        &self,
        config: VmConfig,
        old: Option<&ScriptVm>,
    ) -> Result<ScriptVm, SwitchError> {
        Ok(match (self, old) {
            (Code::Script(c), Some(old)) => ScriptVm::new_keeping(c, config, old)?,
            (Code::Script(c), None) => ScriptVm::new_with(c, config)?,
            (Code::Object(o), old) => ScriptVm::from_object(o, config, old)?,
        })
    }

    /// Its pipeline's post program, if any (a script's is compiled now).
    pub(crate) fn post(&self) -> Result<Option<PostCode<'a>>, SwitchError> {
        match *self {
            Code::Script(c) => {
                let opts = nfkit_lang::Options {
                    hook: Some(c.hook),
                    ..nfkit_lang::Options::default()
                };
                let pc = nfkit_lang::pipeline::post_of(c, &opts)
                    .map_err(|e| SwitchError::Post(e.to_string()))?;
                Ok(pc.map(|p| PostCode::Script(Box::new(p))))
            }
            Code::Object(o) => Ok(o.post.as_deref().map(PostCode::Object)),
        }
    }
}
