package daemon

import (
	"fmt"
	"log/slog"

	"tfd/daemon/config"
	"tfd/daemon/status"
	"tfd/engine"
	"tfd/promptcache"
)

// An instance's prompt cache: its blocks in the backend's memory, as many as the plan's cache
// budget holds, and its spill folder. The store is made with the model, even at 0 blocks, so that
// a reload can grow it on the lane (the only goroutine that may drive the backend once the host
// runs); the spill folder is opened and swapped here, since it touches no backend.

// openCache makes the instance's prompt cache for cfg under its plan; the model is loaded.
func (in *instance) openCache(cfg config.Config, logger *slog.Logger) error {
	store, err := in.model.NewBlockStore(in.cacheBlocks(), promptcache.BlockTokens)
	if err != nil {
		return fmt.Errorf("daemon: allocate the prompt cache (%s, prompt_cache.gib): %w", engine.FormatBytes(in.plan.Cache), err)
	}
	in.store = store
	in.identity = in.model.Identity()
	if in.disk, err = openSpill(cfg.PromptCache, in.identity, logger); err != nil {
		return err
	}
	in.cache = promptcache.New(store, promptcache.Options{Identity: in.identity, Spill: in.spill(), Logger: logger})
	return nil
}

// openSpill opens the spill folder pc names, or returns nil when it names none.
func openSpill(pc config.PromptCacheConfig, identity string, logger *slog.Logger) (*promptcache.Disk, error) {
	if pc.SpillDir == "" {
		return nil, nil
	}
	d, err := promptcache.OpenDisk(promptcache.DiskOptions{Dir: pc.SpillDir, Limit: int64(pc.SpillGiB * engine.GiB), Identity: identity, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("daemon: prompt_cache.spill_dir %s: %w", pc.SpillDir, err)
	}
	return d, nil
}

// cacheBlocks is how many blocks the plan's cache budget holds.
func (in *instance) cacheBlocks() int {
	block := in.plan.CacheBlockBytes(promptcache.BlockTokens)
	if block <= 0 {
		return 0
	}
	return int(in.plan.Cache / block)
}

// spill is the instance's spill folder as the cache takes it: a nil interface when there is none.
func (in *instance) spill() promptcache.Spill {
	if in.disk == nil {
		return nil
	}
	return in.disk
}

// respill puts next's spill settings in force over old's: a new limit on the same folder at once;
// another folder (or none) is opened here and handed to the host, which closes the old one once it
// has let go of it.
func (s *server) respill(old, next config.Config, cur *instance, r *reloadReport) error {
	pc := next.PromptCache
	s.mu.Lock()
	same := cur.disk != nil && old.PromptCache.SpillDir == pc.SpillDir
	s.mu.Unlock()
	if same {
		cur.disk.SetLimit(int64(pc.SpillGiB * engine.GiB))
		r.apply("prompt cache spill folder %s holds up to %g GiB", pc.SpillDir, pc.SpillGiB)
		return nil
	}
	d, err := openSpill(pc, cur.identity, s.logger)
	if err != nil {
		return err
	}
	s.mu.Lock()
	cur.disk = d
	opts := cur.sharedOptions(next)
	s.mu.Unlock()
	if err := cur.host.Reconfigure(opts); err != nil {
		return fmt.Errorf("daemon: hand the host the new spill folder: %w", err)
	}
	if d == nil {
		r.apply("prompt cache: no spill folder")
	} else {
		r.apply("prompt cache spill folder %s, up to %g GiB", pc.SpillDir, pc.SpillGiB)
	}
	return nil
}

// cacheStats reads the serving instance's prompt cache counters and its spill folder's; zero
// where there is none.
func (s *server) cacheStats() (promptcache.Stats, promptcache.DiskStats) {
	var c *promptcache.Cache
	var d *promptcache.Disk
	s.mu.Lock()
	if in := s.cur; in != nil {
		c, d = in.cache, in.disk
	}
	s.mu.Unlock()
	var cs promptcache.Stats
	var ds promptcache.DiskStats
	if c != nil {
		cs = c.Stats()
	}
	if d != nil {
		ds = d.Stats()
	}
	return cs, ds
}

// cacheReport is the prompt cache's part of the status report.
func (s *server) cacheReport() status.PromptCache {
	cs, ds := s.cacheStats()
	s.mu.Lock()
	dir := s.cfg.PromptCache.SpillDir
	s.mu.Unlock()
	block := int64(cs.BlockBytes)
	return status.PromptCache{BlockTokens: promptcache.BlockTokens, Blocks: cs.Blocks, CapacityBlocks: cs.Capacity,
		Bytes: int64(cs.Blocks) * block, CapacityBytes: int64(cs.Capacity) * block,
		Lookups: cs.Lookups, Hits: cs.Hits, TokensReused: cs.TokensReused, Evictions: cs.Evictions,
		SpillDir: dir, SpillBytes: ds.Bytes, SpillFiles: ds.Files, SpillFull: ds.Full}
}
