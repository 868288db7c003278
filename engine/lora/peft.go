package lora

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/safetensors"
	"github.com/artgo/art/internal/atomicfile"
)

// File names of a PEFT adapter folder.
const (
	ConfigFile  = "adapter_config.json"
	WeightsFile = "adapter_model.safetensors"
)

// peftConfig is the adapter_config.json PEFT writes for a causal-LM LoRA.
type peftConfig struct {
	BaseModelNameOrPath string   `json:"base_model_name_or_path"`
	Bias                string   `json:"bias"`
	FanInFanOut         bool     `json:"fan_in_fan_out"`
	InferenceMode       bool     `json:"inference_mode"`
	InitLoraWeights     bool     `json:"init_lora_weights"`
	LayersToTransform   []int    `json:"layers_to_transform"`
	LoraAlpha           float64  `json:"lora_alpha"`
	LoraDropout         float64  `json:"lora_dropout"`
	ModulesToSave       []string `json:"modules_to_save"`
	PeftType            string   `json:"peft_type"`
	R                   int      `json:"r"`
	TargetModules       []string `json:"target_modules"`
	TaskType            string   `json:"task_type"`
	UseDora             bool     `json:"use_dora"`
	UseRslora           bool     `json:"use_rslora"`
}

// tensorName is PEFT's name for one factor of p, e.g.
// base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight, or for an
// expert's projection …layers.3.mlp.experts.17.gate_proj.lora_A.weight.
func tensorName(p *pair, factor string) string {
	if p.expert >= 0 {
		return fmt.Sprintf("base_model.model.model.layers.%d.mlp.experts.%d.%s.lora_%s.weight", p.layer, p.expert, p.mod, factor)
	}
	return fmt.Sprintf("base_model.model.model.layers.%d.%s.%s.lora_%s.weight", p.layer, p.mod.Parent(), p.mod, factor)
}

// Save writes the adapter to dir in PEFT's format (F32 weights), each file
// atomically. baseModel is recorded as base_model_name_or_path.
func (a *Adapter) Save(dir, baseModel string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("lora: save: %w", err)
	}
	var tensors []safetensors.Tensor
	r := a.Config.Rank
	for _, p := range a.order {
		tensors = append(tensors,
			safetensors.FromF32(tensorName(p, "A"), safetensors.F32, []int{r, p.in}, p.A),
			safetensors.FromF32(tensorName(p, "B"), safetensors.F32, []int{p.out, r}, p.B))
	}
	if err := safetensors.WriteFile(filepath.Join(dir, WeightsFile), tensors, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("lora: save: %w", err)
	}
	targets := slices.Clone(a.Config.TargetModules)
	sort.Strings(targets)
	cfg := peftConfig{
		BaseModelNameOrPath: baseModel, Bias: "none", InferenceMode: true, InitLoraWeights: true,
		LayersToTransform: a.Config.Layers, LoraAlpha: a.Config.Alpha, LoraDropout: a.Config.Dropout,
		PeftType: "LORA", R: r, TargetModules: targets, TaskType: "CAUSAL_LM", UseRslora: a.Config.UseRSLoRA,
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("lora: save: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, ConfigFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("lora: save: %w", err)
	}
	return nil
}

// Load reads a PEFT LoRA folder for a model of shape mcfg. Weights in any
// float dtype are widened to fp32. Every tensor must belong to a target
// module and layer the config declares, with the right shape.
func Load(dir string, mcfg model.Config) (*Adapter, error) {
	b, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		return nil, fmt.Errorf("lora: load: %w", err)
	}
	var pc peftConfig
	if err := json.Unmarshal(b, &pc); err != nil {
		return nil, fmt.Errorf("lora: %s: invalid JSON: %w", filepath.Join(dir, ConfigFile), err)
	}
	if pc.PeftType != "" && pc.PeftType != "LORA" {
		return nil, fmt.Errorf("lora: %s: peft_type %q is not LORA", dir, pc.PeftType)
	}
	if pc.UseDora || pc.FanInFanOut || (pc.Bias != "" && pc.Bias != "none") || len(pc.ModulesToSave) > 0 {
		return nil, fmt.Errorf("lora: %s: DoRA, fan_in_fan_out, bias training and modules_to_save are not supported", dir)
	}
	a, err := newZero(mcfg, Config{Rank: pc.R, Alpha: pc.LoraAlpha, Dropout: pc.LoraDropout,
		TargetModules: pc.TargetModules, Layers: pc.LayersToTransform, UseRSLoRA: pc.UseRslora})
	if err != nil {
		return nil, fmt.Errorf("lora: %s: %w", dir, err)
	}
	f, err := safetensors.Open(filepath.Join(dir, WeightsFile))
	if err != nil {
		return nil, fmt.Errorf("lora: %w", err)
	}
	defer f.Close()
	want := map[string][]float32{}
	for _, p := range a.order {
		want[tensorName(p, "A")] = p.A
		want[tensorName(p, "B")] = p.B
	}
	var problems []string
	for _, name := range f.Names() {
		dst, ok := want[normalizeName(name)]
		if !ok {
			problems = append(problems, "unexpected tensor "+name)
			continue
		}
		info, _ := f.Info(name)
		if info.NumElements() != len(dst) {
			problems = append(problems, fmt.Sprintf("tensor %s has shape %v", name, info.Shape))
			continue
		}
		if err := f.ReadF32Into(name, dst); err != nil {
			problems = append(problems, err.Error())
		}
		delete(want, normalizeName(name))
	}
	missingExperts := 0
	for name := range want {
		problems = append(problems, "missing tensor "+name)
		if strings.Contains(name, ".mlp.experts.") {
			missingExperts++
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		if len(problems) > 6 {
			problems = append(problems[:6], "and "+strconv.Itoa(len(problems)-6)+" more")
		}
		if missingExperts > 0 && missingExperts == len(want) {
			// What an adapter of a mixture saved before the experts were
			// adapted looks like: everything there but the experts'.
			problems = append([]string{"the adapter holds no factors for the experts, which its target modules reach in this mixture-of-experts model (saved by a version that left the experts frozen?): retrain it, or list in its adapter_config.json's target_modules only the modules it holds"}, problems...)
		}
		return nil, fmt.Errorf("lora: load %s: %w", dir, errors.New(strings.Join(problems, "; ")))
	}
	return a, nil
}

// normalizeName maps PEFT's adapter-named variant
// (…lora_A.default.weight) to the plain saved form.
func normalizeName(name string) string {
	return strings.Replace(strings.Replace(name, ".lora_A.default.", ".lora_A.", 1), ".lora_B.default.", ".lora_B.", 1)
}
