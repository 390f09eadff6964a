//! Map sync's derivation: analysis, uniform regions, rules, timed, with
//! the regions' analyses kept between derivations ([`RegionCache`]).

use crate::error::OffloadError;
use crate::hoist::{hoist_cached, RegionCache};
use crate::rules::{generate, RuleSet, RulesOptions};
use crate::source::MapSource;
use crate::symbolic::{analyse, Analysis, Limits};
use nfkit_object::Image;
use std::time::{Duration, Instant};

/// What one derivation produced and where its time went.
#[derive(Clone, Debug)]
pub struct Derivation {
    /// The analysis, uniform regions first.
    pub analysis: Analysis,
    pub rules: RuleSet,
    /// Uniform regions placed before the paths.
    pub hoisted: usize,
    /// Regions taken from the cache / analysed in this derivation.
    pub regions_cached: usize,
    pub regions_analysed: usize,
    /// The analysis of the whole program.
    pub analyse_time: Duration,
    /// Regions (cache checks and the analyses of changed ones).
    pub hoist_time: Duration,
    /// Rule generation (merging, budget).
    pub generate_time: Duration,
}

impl Derivation {
    /// The whole derivation's time.
    pub fn total(&self) -> Duration {
        self.analyse_time + self.hoist_time + self.generate_time
    }
}

/// Derives the rules of one program again and again as its maps change
/// (`nfkit offload --watch`); regions are hoisted when
/// [`Limits::data_path_maps`] is set.
#[derive(Debug, Default)]
pub struct Deriver {
    cache: RegionCache,
}

impl Deriver {
    pub fn new() -> Deriver {
        Deriver::default()
    }

    /// The rules for `entry` of `image` with the maps as `maps` holds
    /// them now (and the clock as `limits.now_ns`).
    pub fn derive(
        &mut self,
        image: &Image,
        entry: &str,
        maps: &dyn MapSource,
        limits: &Limits,
        options: &RulesOptions,
    ) -> Result<Derivation, OffloadError> {
        let t0 = Instant::now();
        let a = analyse(image, entry, maps, limits)?;
        let t1 = Instant::now();
        let (hits, misses) = (self.cache.hits, self.cache.misses);
        let (analysis, hoisted) = if limits.data_path_maps {
            hoist_cached(image, maps, limits, &a, &mut self.cache)?
        } else {
            (a, 0)
        };
        let t2 = Instant::now();
        let rules = generate(&analysis, options);
        let t3 = Instant::now();
        Ok(Derivation {
            analysis,
            rules,
            hoisted,
            regions_cached: self.cache.hits - hits,
            regions_analysed: self.cache.misses - misses,
            analyse_time: t1 - t0,
            hoist_time: t2 - t1,
            generate_time: t3 - t2,
        })
    }

    /// The regions kept for the next derivation.
    pub fn cache(&self) -> &RegionCache {
        &self.cache
    }
}
