package validate

// Report is what CheckSet learnt besides the errors.
type Report struct {
	Guarded     []Guarded
	Policies    map[string]string // policy text by Deployment
	CanaryShare float64           // enforcing share of a canary's replicas; 0 when no canary
	Records     map[string]bool   // series the recording rules make
	HPASeries   []string          // gpuguard series the HPAs scale on, through the adapter
}

// PolicyResolver resolves a policy file's text to the settings gpuguard
// derives from it (the tests run `gpuguard policy check`).
type PolicyResolver func(text string) (PolicySummary, error)

// CheckSet runs every check on one kustomization's decoded output: the
// gpuguard containers and their policies, the objects that serve and
// scrape them, the canary split, the rules and the autoscaling, the PromQL
// against series (what gpuguard exports).
func CheckSet(s Set, series Series, resolve PolicyResolver) (Report, []error) {
	r := Report{Policies: map[string]string{}}
	var errs []error
	for _, d := range s.Deployments {
		errs = append(errs, CheckVolumes(d)...)
	}
	guarded, gerrs := FindGuarded(s)
	r.Guarded = guarded
	errs = append(errs, gerrs...)
	pols := map[string]PolicySummary{}
	for _, g := range guarded {
		text, err := PolicyFile(s, g)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.Policies[g.Deployment.Name] = text
		p, err := resolve(text)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pols[g.Deployment.Name] = p
		errs = append(errs, CheckWorkload(g, p)...)
	}
	errs = append(errs, CheckServing(s, guarded, pols)...)

	share, cerrs := CheckCanary(guarded)
	r.CanaryShare = share
	errs = append(errs, cerrs...)

	c := NewChecker(series, ScrapeLabels(s), Records(s))
	r.Records = c.Records
	errs = append(errs, CheckRules(s, c)...)

	served := map[string]AdapterMetric{}
	cfgs, aerrs := AdapterConfigs(s)
	errs = append(errs, aerrs...)
	for _, cfg := range cfgs {
		m, merrs := CheckAdapter(cfg, c)
		errs = append(errs, merrs...)
		for k, v := range m {
			served[k] = v
		}
	}
	hs, herrs := CheckHPA(s, served)
	r.HPASeries = hs
	errs = append(errs, herrs...)
	return r, errs
}
